"""Reports, gates, comparisons and schedules built from gameday journals.

Pure modules: :mod:`.model` (journal -> typed view), :mod:`.score`,
:mod:`.stats`, :mod:`.junit`, :mod:`.manifests`; rendering: :mod:`.charts`
(matplotlib SVG) and :mod:`.render` (jinja2 HTML/Markdown).
"""
