"""AG-UI (Agent-User Interaction protocol, ``ag-ui-protocol`` 1.0): ``POST /ag-ui/{target}``."""
