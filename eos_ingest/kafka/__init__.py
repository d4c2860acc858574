"""Every Kafka client of the package: the admin client and offsets (librdkafka), the settings translated for Kafka's Java client and for kafka-python, and the gate's independent count of committed records.

Imports plan/ and the package root. Not the kafka-python package: that is `kafka` under absolute imports."""
