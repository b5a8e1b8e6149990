"""A reusable qemu micro-VM running Debian's stock kernel (netem and friends as modules).

Used by the network test lane (netem needs a real kernel; the host's has none)
and by the local sandbox (a whole topology in network namespaces inside the
VM). See :mod:`chaos_ext._products.sandbox.vm.machine` for the API and
:mod:`chaos_ext._products.sandbox.vm.lane` for running a pytest selection inside it.
"""
