"""Stage 5, health: assess live objects with Argo CD's vocabulary, Ray kinds included."""
