"""JSON Schemas of rollcheck's file formats, shipped as package data (``importlib.resources``)."""
