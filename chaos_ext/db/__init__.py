"""Database connection exhaustion (PostgreSQL, MySQL/MariaDB/Aurora MySQL) and its probes."""
