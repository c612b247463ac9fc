"""``memoryd bench sessions``: how fast a session resumes (ResumeSession) on the embedded default."""

from ._sessions import add_sessions_command

__all__ = ["add_sessions_command"]
