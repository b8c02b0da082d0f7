"""Pure functions from results to text: tables for the terminal, files and reports."""
