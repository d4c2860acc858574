#!/usr/bin/env bash
# A private CA and a broker certificate for the test broker's SASL_SSL listener, made fresh with
# openssl (keys, certificates) and keytool (the broker's PKCS12 keystore, checked by Java itself).
#   tls.sh <folder>
# Writes into <folder>: ca.pem (the CA clients trust: librdkafka's ssl.ca.location), ca.key,
# broker.pem/broker.key (SAN 127.0.0.1 and localhost), broker.p12 (keystore, password in
# keystore.password) and truststore.p12 (the CA alone, same password, for Java clients).
# Nothing here is a production secret: the folder belongs to one broker's state and is deleted
# with it.
set -euo pipefail
DIR="${1:?usage: tls.sh <folder>}"
mkdir -p "$DIR"
cd "$DIR"
umask 077
DAYS=30
PASS="$(openssl rand -hex 16)"
printf '%s' "$PASS" > keystore.password

openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days "$DAYS" \
  -subj "/CN=eos-ingest test CA" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout broker.key -out broker.csr -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > broker.ext
openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out broker.pem \
  -days "$DAYS" -extfile broker.ext 2>/dev/null
openssl pkcs12 -export -in broker.pem -inkey broker.key -certfile ca.pem -name broker \
  -out broker.p12 -passout "pass:$PASS"
rm -f truststore.p12
keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 -storetype PKCS12 \
  -storepass "$PASS" >/dev/null 2>&1
rm -f broker.csr broker.ext ca.srl
chmod 644 ca.pem
