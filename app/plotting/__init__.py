"""The plotting kit the tabs draw with: axes, legend, key, series, cursors, label
placement and SVG coordinates for exports. No knowledge of attention here."""
