"""Group coordinator: classic, consumer (KIP-848) and share (KIP-932) groups; sans-IO state machines."""
