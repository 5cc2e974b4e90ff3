"""Process exit codes, documented in the README for operators and systemd units."""

OK = 0
FAILURE = 1  # `check` found a problem; a command failed
USAGE = 2  # bad command line (argparse's own code)
CONFIG = 3  # the configuration is invalid
DATABASE = 4  # the database cannot be opened or is newer than this code
PLATFORM_AUTH = 5  # a platform refused us for good (revoked token, another poller)
AGENT = 6  # the agent cannot be started at all (`picobridge chat`)
BUSY = 7  # http.listen's port stayed in use (another process has it): worth a restart
INTERNAL = 70  # an unforeseen error inside picobridge (a bug): one line, see the log
INTERRUPTED = 130  # stopped by Ctrl-C (SIGINT), as shells report it
