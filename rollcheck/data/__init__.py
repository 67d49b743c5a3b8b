"""Example data that ``rollcheck verify`` reads at run time, shipped as package data."""
