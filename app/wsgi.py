"""The WSGI entry point gunicorn serves: ``app.wsgi:app``."""

from app import create_app

app = create_app()
