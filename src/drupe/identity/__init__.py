"""Identity: who makes each request (sign-in sessions, personal tokens, gateway keys) and the
owner-based access policy the ``Conversations`` port and the stores enforce (issue 20,
``docs/security.md``)."""
