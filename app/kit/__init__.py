"""What every view of the app builds on: the plain-text rule for strings from outside
(`plain_text`), the themes and their palettes (`theme`), the elided label, the app state's
change signal for Qt (`state_signal`) and the saved settings (`settings`, `settings_store`)."""
