"""What the tests share: reading calltap's log, and (as it grows) the providers and topologies
every suite builds on."""
