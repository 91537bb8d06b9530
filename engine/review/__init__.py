"""Reviews of published statistics for people: the difference between two states
(``diff``) and alerts about columns (``alerts``), from stored statistics only."""
