"""The analyst's surface: figures, the annotation widget, the report and the demo.

``figures`` draws the charts, ``ui`` is the annotation widget, ``report`` runs the packaged
notebooks (``notebooks/``) with papermill into the offline HTML template (``templates/``), and
``demo`` builds the demo tree and store.
"""

__all__: list[str] = []
