"""One process holds an embedded store and serves it to the others: the owner endpoint, the
remote client, the wire protocol, and which bank a process opens."""
