"""The bench view: a live web dashboard of the link (``hil dashboard``).

``tap``: what the processes publish (non-blocking ZeroMQ PUB). ``server``: the aiohttp app
that subscribes to it and pushes state to the page (``static/``: HTML, CSS and JavaScript
written for this project; nothing is fetched at run time).
"""
