"""DNS faults and probes: dnsmasq TCP saturation, query floods, resolution statistics."""
