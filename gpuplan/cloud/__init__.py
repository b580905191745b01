"""Cloud instance catalogs (package data)."""
