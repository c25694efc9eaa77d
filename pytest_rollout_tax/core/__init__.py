"""The sandbox and its substrate's primitives: timing, transports, the contract, records."""
