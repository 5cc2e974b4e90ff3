"""What the service manager and operators see: health, metrics, sdnotify, logs."""
