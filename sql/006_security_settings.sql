-- Installation-wide security settings, shared by every instance. Each change
-- sends NOTIFY nakadi_security_settings; instances re-read them at once.

-- Nakadi's administrators (AdminAuthorization). While the table is empty,
-- NAKADI_ADMINS applies.
CREATE TABLE nakadi_admins (
    permission text NOT NULL CHECK (permission IN ('admins', 'readers', 'writers')),
    data_type  text NOT NULL CHECK (data_type <> ''),
    value      text NOT NULL CHECK (value <> ''),
    PRIMARY KEY (permission, data_type, value)
);

-- Blocked consumers and producers, by application or event type.
CREATE TABLE blacklist (
    type       text NOT NULL CHECK (type IN ('CONSUMER_APP', 'CONSUMER_ET',
                                             'PRODUCER_APP', 'PRODUCER_ET')),
    name       text NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (type, name)
);

-- Feature toggles; a feature without a row is disabled.
CREATE TABLE feature_toggles (
    feature    text PRIMARY KEY,
    enabled    boolean NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
