"""`calltap replay`: a recorded pair played back through a gateway, as a reproduction."""
