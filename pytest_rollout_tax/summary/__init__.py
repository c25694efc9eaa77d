"""A report (and the gate's verdict) as a summary of sections, made once and rendered twice:
to the terminal's width (terminal.py) and on the HTML page (page/)."""
