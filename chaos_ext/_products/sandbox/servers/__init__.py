"""Throwaway real servers (own data dir, own port) for tests and the sandbox."""
