"""Security: who is calling (OAuth2 token info), what they may do (per-resource
authorization, Nakadi administrators), and the installation-wide settings that
change it at run time (admins, blacklist, feature toggles).

With no ``NAKADI_OAUTH2_TOKENINFO_URL`` authentication is off and every caller
has every right, as the local stack expects.
"""
