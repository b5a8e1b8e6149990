"""Open-loop HTTP load during experiments (drive_http_load, load_window_stats)."""
