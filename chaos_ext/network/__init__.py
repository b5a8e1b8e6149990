"""Network faults: latency (tc netem) scoped to destinations, on a local interface,
a network namespace, a process's namespace, a node over SSH or a pod."""
