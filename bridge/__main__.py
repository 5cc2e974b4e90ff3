import sys

from picobridge.cli.main import main

sys.exit(main())
