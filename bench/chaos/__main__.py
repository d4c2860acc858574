import sys

from bench.chaos.run import main

sys.exit(main())
