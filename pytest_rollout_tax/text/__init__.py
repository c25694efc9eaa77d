"""How figures and lines read, for every wing that writes text: units and the width."""
