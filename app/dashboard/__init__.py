"""The operator dashboard: static HTML and JavaScript modules served by the API under /dashboard."""
