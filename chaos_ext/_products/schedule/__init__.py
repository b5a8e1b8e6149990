"""Scheduled game days: the CronJob, ServiceAccount and RBAC manifests of ``gameday schedule``."""
