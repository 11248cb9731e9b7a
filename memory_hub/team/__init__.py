"""Team memory: a vault shared through a git remote (``sync``), and several vaults searched as one
(``search``). See docs/team.md."""
