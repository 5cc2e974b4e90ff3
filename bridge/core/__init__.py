"""The core: intake, access, commands, router and outbox. Names no platform."""
