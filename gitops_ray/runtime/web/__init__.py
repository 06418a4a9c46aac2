"""The controller's read-only web page (app list, app detail) and its optional actions."""
