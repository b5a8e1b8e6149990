"""Where a fault goes: this host, a network namespace, a process, a node over SSH, a pod.

Shared by the fault domains that act inside a target's network stack
(``chaos_ext.network`` for netem, ``chaos_ext.dns`` for the resolver
packet-rate limit): parsing ``local`` / ``netns:NAME`` / ``pid:PID`` /
``ssh:HOST[:PORT]`` / ``pod:NAMESPACE/NAME[/CONTAINER]`` (:mod:`.spec`),
entering a namespace per thread (:mod:`.netns`), finding a pod's node and
container (:mod:`.pod`), running commands there over SSH (:mod:`.remote`), and
what a plan checks before a fault on one: CAP_NET_ADMIN, SSH reachability (:mod:`.access`).
"""
