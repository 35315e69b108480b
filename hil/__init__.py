"""Deep JSCC hardware-in-the-loop: channels, PHY, codec, radios and the link."""

__version__ = "0.1.0"
