"""Conversation sessions: which memories were written in which session of a subject, when a
session ended, the snapshot a reader's filter reads of it, and the idle sweep's claims."""

from ._sessions import SessionSnapshots, drop_subject_sessions, join_session, open_session_tenants

__all__ = ["SessionSnapshots", "drop_subject_sessions", "join_session", "open_session_tenants"]
