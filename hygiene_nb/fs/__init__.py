"""What the filesystem says right now, read-only.

Mount ids and the mount table (``mounts``), and subtree fingerprints walked from directory
handles with no symlink followed (``fingerprint``).
"""

__all__: list[str] = []
