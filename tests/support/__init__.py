"""What the tests share: reading calltap's log, how many examples a property test runs, and (as it
grows) the providers and topologies every suite builds on."""
