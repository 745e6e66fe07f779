"""Flexible bodies: beam finite elements, modal reduction, modal data (SID), floating frames."""
