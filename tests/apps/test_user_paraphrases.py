"""The rule-based person understands plain requests: a paraphrase set per intent, per domain.

Each intent the rule player knows has ``asks``: plain, natural ways a competent agent asks for
it (imperative, polite question, "use X to do Y", pleasantries, British/American wording, the
object named differently, two requests in one message), and ``misses``: near-misses that must
not make the person do anything (negations, the agent describing its own work, talk about the
thing without asking, a different object). Every ask runs one turn of the person on a fresh
shared state, prepared so that the action can succeed, and is checked on that state: the
person used exactly the intent's tools (the action log), and the change happened. An info
intent (a question the person answers from what they know) uses no tool and is checked on the
intents found. Every near-miss leaves the state untouched: no tool used, no request found.
"""

import json
import sqlite3

import pytest

from longhorizon.apps.user import identity, mobile, onboarding
from longhorizon.apps.user.base import find_hits
from longhorizon.apps.user.simulator import converse
from test_user import seed_identity, seed_mobile, seed_onboarding

RULES = ("Your new password must be at least 14 characters, with an upper-case letter, a lower-case letter, "
         "a digit and a symbol, and it must not contain your name or username.")


# -- the paraphrase sets ----------------------------------------------------------------------------
# intent: {"tools": the person's tools it uses ([] for info), "asks": [text or (text, extra tools)],
#          "misses": [text], "check": state predicate after an ask (optional)}

IDENTITY = {
    "employee_id": {"tools": [], "asks": [
        "Could you tell me your employee ID, please?",
        "What's your employee number?",
        "To verify your identity, I'll need your staff ID.",
        "Please confirm your employee ID for me.",
        "Can I have your badge number?",
        "First things first: what is your employee ID?",
        "May I take your employee number so I can find your account?",
    ], "misses": [
        "Thanks, the employee ID you gave matches our records.",
        "I've found your account using your employee ID.",
        "Your employee ID is printed on your badge.",
    ]},
    "name": {"tools": [], "asks": [
        "Can you confirm your full name?",
        "What's your name, please?",
        "Could I get your full name?",
        "Please state your full legal name.",
        "Who am I speaking with today?",
        "May I have your name?",
    ], "misses": [
        "Thank you, the name you gave matches the directory.",
        "I'll put your name on the ticket.",
        "There are two accounts with your name.",
    ]},
    "department": {"tools": [], "asks": [
        "Which department are you in?",
        "What team do you work on?",
        "Could you tell me which department you're in?",
        "What department do you work in, please?",
        "Please confirm your department.",
        "And which team are you part of?",
    ], "misses": [
        "I've noted your department on the ticket.",
        "The Finance team will be notified.",
        "Your department's IT contact has been copied.",
    ]},
    "username": {"tools": [], "asks": [
        "What's your username?",
        "Please confirm your username.",
        "What is your user ID?",
        "Can you tell me your account name?",
        "What username do you use?",
        "Could you tell me your login name?",
    ], "misses": [
        "Your username stays the same.",
        "I've looked up your username in the directory.",
        "Thanks, that username matches.",
    ]},
    "device": {"tools": [], "asks": [
        "Which device did you lose?",
        "What phone did you lose?",
        "Which devices do you still have?",
        "What did you lose exactly?",
        "Can you tell me which phone was lost or stolen?",
        "Do you still have your laptop?",
    ], "misses": [
        "I'm sorry you lost your phone.",
        "I'll end the sessions on the lost device.",
        "The lost phone can no longer sign in.",
    ]},
    "code": {"tools": ["check_email"], "asks": [
        "Please read me the code we just emailed you.",
        "Could you check your email and tell me the verification code?",
        "What's the six-digit code in the email we sent?",
        "I've sent a code to your recovery address, could you read it back to me?",
        "Can you give me the one-time passcode from your inbox?",
        "Please tell me the PIN we just sent to your personal email.",
        "Once you receive the code, please read it out to me.",
        "Kindly share the verification code with me.",
        "Great, thanks! Could you let me know the code in the email I just sent?",
    ], "misses": [
        "Don't read me the code yet.",
        "I've verified the code you gave me.",
        "The code expires in ten minutes.",
        "I'll send a verification code to your recovery email now.",
    ]},
    "email": {"tools": ["check_email"], "asks": [
        "Please check your email.",
        "Could you have a look in your personal inbox?",
        "Can you open your recovery mailbox and tell me what's there?",
        "Take a look at your mail, please.",
        "Would you check your e-mail for a message from us?",
        "Please go to your inbox and look for our message.",
    ], "misses": [
        "I'll email you shortly.",
        "Don't check your email yet.",
        "Your email address on file is ana88@gmail.com.",
        "I've emailed the reset link to your recovery address.",
    ]},
    "texts": {"tools": ["check_text_messages"], "asks": [
        "Please check your text messages.",
        "Could you look at your SMS?",
        "Can you check your texts for a message from us?",
        "Please read the text we sent to your mobile.",
        "Look at your texts, please.",
        "Would you check your SMS messages?",
    ], "misses": [
        "I'll text you a code.",
        "We can't send texts to a lost phone.",
        "Don't bother checking your texts.",
    ]},
    "password": {"tools": ["set_new_password"], "asks": [
        "Please use it to update your password.",
        "Please open the reset link and choose a new password.",
        "Could you change your password now?",
        "Go ahead and reset your password using the link in your email.",
        "Can you pick a new password that follows those rules?",
        "Please set a new passphrase.",
        "Kindly update your password via the link we sent you.",
        "Now create a new password, please.",
        "Please click the link in the email and change your password.",
        ("Please check your email, then open the reset link and set a new password.", ["check_email"]),
    ], "misses": [
        "Never share your password with anyone.",
        "I've reset your password on my side.",
        "Your new password must be at least 14 characters long.",
        "Don't change your password yet.",
        "I'll send you a password reset link.",
    ], "check": lambda c: _one(c, "SELECT password_changed FROM accounts WHERE id = 'U1'") == 1},
    "authenticator": {"tools": ["set_up_authenticator"], "asks": [
        "Please scan the QR code with the authenticator app on your new phone.",
        "Could you set up the authenticator app on your Pixel?",
        "Go ahead and enrol your new phone for two-factor authentication.",
        "Please add your account to Microsoft Authenticator on the new phone.",
        "Can you register your new device for MFA?",
        "Now set up 2FA using the QR code on screen.",
        "Please scan the barcode on the screen with your authenticator.",
    ], "misses": [
        "I've reset your MFA, so the old authenticator no longer works.",
        "Don't scan the QR code yet.",
        "Your authenticator app was on the lost phone.",
    ], "check": lambda c: _one(c, "SELECT mfa_device FROM accounts WHERE id = 'U1'") == "Pixel 8"},
    "screen": {"tools": ["look_at_screen"], "asks": [
        "What do you see on your screen now?",
        "What does the page say?",
        "Could you look at your screen and tell me what it shows?",
        "Please check the screen and describe what's there.",
        "What's on your screen at the moment?",
        "What does your browser show?",
    ], "misses": [
        "Your screen may look different from mine.",
        "Don't worry about the error on the screen.",
        "I can see your account on my screen.",
    ]},
    "sign_in": {"tools": ["sign_in"], "asks": [
        "Please try signing in again.",
        "Could you log in now?",
        "Go ahead and sign in to your account.",
        "Can you try to log on to the portal?",
        "Please try logging in with your new password.",
        "Try to sign into your work account, please.",
        "Would you sign in and let me know what happens?",
        "You'll have to sign in again now.",
    ], "misses": [
        "Don't sign in yet.",
        "I can see you signed in yesterday from New York.",
        "Your sign-in sessions on the lost phone have been revoked.",
        "You won't be able to log in until I unlock the account.",
    ]},
}

MOBILE = {
    "number": {"tools": [], "asks": [
        "Could you give me the phone number of the affected line?",
        "Which number is having the problem?",
        "What's your mobile number?",
        "Can you tell me the number of the line that isn't working?",
        "Please confirm your cell number.",
        "What number are you calling about?",
    ], "misses": [
        "I'll send a text to your number.",
        "Thanks, I've found the line with that number.",
        "We never share your phone number.",
    ]},
    "zip": {"tools": [], "asks": [
        "What's the ZIP code on your billing address?",
        "Could you confirm your postcode?",
        "Please tell me the zip code for the account.",
        "What is the postal code on file?",
        "And your ZIP, please?",
        "To verify, I need the billing ZIP code.",
    ], "misses": [
        "Thanks, the ZIP code matches.",
        "I've updated your billing address.",
        "The postcode is only used for billing.",
    ]},
    "name": {"tools": [], "asks": [
        "Can I have the account holder's full name?",
        "What's your full name?",
        "Who am I speaking with?",
        "Please confirm your name.",
        "May I have your name, please?",
        "Could you tell me the name on the account?",
    ], "misses": [
        "Thank you, the name you gave matches our records.",
        "I'll note your name on the case.",
        "There are two customers with a similar name.",
    ]},
    "where": {"tools": [], "asks": [
        "Are you abroad at the moment?",
        "Where are you right now?",
        "Are you travelling outside the country?",
        "Which country are you in?",
        "Are you currently overseas?",
        "Are you at home or traveling?",
    ], "misses": [
        "Roaming is only for when you're abroad.",
        "I see you're travelling.",
        "Roaming charges apply overseas.",
    ]},
    "model": {"tools": [], "asks": [
        "What phone do you have?",
        "Is it an iPhone or an Android?",
        "What's the make and model of your phone?",
        "What kind of phone is it?",
        "Could you tell me your phone model?",
        "Which phone are you using?",
    ], "misses": [
        "Your phone model supports 5G.",
        "I've noted your phone model.",
        "Most phone models have this setting.",
    ]},
    "refuel_amount": {"tools": [], "asks": [
        "How much extra data would you like?",
        "How many GB should I add?",
        "Would you like a data top-up?",
        "Do you want to buy a data refuel?",
        "How many gigabytes of extra data do you want?",
        "Would you be interested in a data pack?",
    ], "misses": [
        "I've added the refuel to your line.",
        "A refuel costs 5 USD per GB.",
        "Your data allowance resets next month.",
    ]},
    "airplane": {"tools": ["set_airplane_mode"], "asks": [
        "Please turn off airplane mode.",
        "Could you switch off flight mode?",
        "Can you disable aeroplane mode on your phone?",
        "Please make sure airplane mode is off.",
        "Go into settings and turn airplane mode off, please.",
        "If airplane mode is on, please switch it off.",
        "Kindly deactivate airplane mode.",
        "Please take your phone out of airplane mode.",
        ("Please turn off airplane mode and restart your phone.", ["restart_phone"]),
    ], "misses": [
        "Don't turn on airplane mode.",
        "Airplane mode is a common cause of this.",
        "I can see airplane mode was on earlier.",
    ], "check": lambda c: _dev(c, "airplane") == "0"},
    "mobile_data": {"tools": ["set_mobile_data"], "asks": [
        "Please turn on mobile data.",
        "Could you switch your cellular data on?",
        "Can you enable mobile data in your settings?",
        "Make sure mobile data is switched on.",
        "Please turn your mobile data back on.",
        "Go to Settings and enable cellular data, please.",
        "Please activate your cell data.",
    ], "misses": [
        "Your mobile data usage is high this month.",
        "I've checked your mobile data plan.",
        "Don't switch off mobile data.",
    ], "check": lambda c: _dev(c, "mobile_data") == "1"},
    "data_roaming": {"tools": ["set_data_roaming"], "asks": [
        "Please turn on data roaming.",
        "Could you enable roaming on your phone?",
        "Switch data roaming on, please.",
        "Make sure roaming is turned on in your settings.",
        "Can you activate data roaming?",
        "Since you're abroad, please turn data roaming on.",
    ], "misses": [
        "I've enabled roaming on your line.",
        "Roaming charges may apply.",
        "Don't turn off data roaming.",
    ], "check": lambda c: _dev(c, "data_roaming") == "1"},
    "restart": {"tools": ["restart_phone"], "asks": [
        "Please restart your phone.",
        "Could you reboot your device?",
        "Can you turn your phone off and on again?",
        "Please switch your phone off and back on.",
        "Go ahead and power cycle the phone.",
        "Would you mind restarting your handset?",
        "Please turn the phone off, wait a few seconds, and turn it back on.",
        "You need to restart your phone now.",
    ], "misses": [
        "There is no need to restart your phone.",
        "I restarted the provisioning of your line.",
        "Restarting won't help until the bill is paid.",
    ]},
    "network_mode": {"tools": ["set_network_mode"], "asks": [
        "Please set the preferred network type to automatic.",
        "Could you change your network mode to 5G/4G/3G/2G auto?",
        "Switch the network type back to LTE, please.",
        "Can you select 4G as the preferred network?",
        "Please change the network mode from 2G only to automatic.",
        "Make sure the preferred network type is automatic.",
        "Go to Settings > Network and pick the recommended network mode.",
    ], "misses": [
        "Your network type is 2G only, which is slow.",
        "I've set the network mode on our end.",
        "Don't change the network mode.",
    ], "check": lambda c: _dev(c, "network_mode") == mobile.AUTO_MODE},
    "apn": {"tools": ["reset_apn_settings"], "asks": [
        "Please reset your APN settings to default.",
        "Could you restore the default APN?",
        "Can you go to Access Point Names and tap Reset to default?",
        "Please reset the access point name.",
        "Set your APN back to the default, please.",
        "Revert the APN to factory settings.",
    ], "misses": [
        "The APN looks wrong to me.",
        "I've reset the APN on our side.",
        "Don't reset the APN.",
    ], "check": lambda c: _dev(c, "apn") == "internet.telvio.net"},
    "speed_test": {"tools": ["run_speed_test"], "asks": [
        "Please run a speed test.",
        "Could you try loading a web page?",
        "Can you check whether the internet works now?",
        "Open your browser and visit any website, please.",
        "Please test your connection.",
        "Try a speedtest and tell me the result.",
    ], "misses": [
        "A speed test won't help until the line is active.",
        "I ran a speed test on our side.",
        "Don't run the speed test yet.",
    ]},
    "status_bar": {"tools": ["check_status_bar"], "asks": [
        "What does the status bar show?",
        "Could you look at the top of your screen and tell me what you see?",
        "How many signal bars do you have?",
        "Do you have any signal?",
        "Please check the status bar at the top of the phone.",
        "Can you read me the network name at the top of your screen?",
    ], "misses": [
        "The status bar icons are explained in our help centre.",
        "I can see your phone has no signal.",
        "Signal strength varies by area.",
    ]},
    "settings": {"tools": ["check_network_settings"], "asks": [
        "Could you open your network settings and tell me what they show?",
        "Please check the mobile network settings.",
        "Go to the cellular settings page, please.",
        "Can you look at your connection settings?",
        "What do your network settings say?",
        "Please open Settings > Network and tell me what it says.",
    ], "misses": [
        "Network settings can be tricky.",
        "I've checked the network settings on our side.",
        "Don't change anything in your network settings.",
    ]},
    "payments": {"tools": ["approve_payment_requests"], "asks": [
        "Please approve the payment request on your phone.",
        "Could you accept the charge I just sent?",
        "Can you authorise the payment?",
        "Please confirm the payment notification on your phone.",
        "You should see a payment prompt; please approve it.",
        "Kindly authorize the pending charge.",
        "Go ahead and pay the bill from the request on your phone.",
    ], "misses": [
        "I've approved the refund on our side.",
        "Don't approve anything yet.",
        "I've sent you a payment request.",
        "The payment request will expire in a day.",
    ], "check": lambda c: _one(c, "SELECT status FROM bills WHERE id = 'B-1'") == "paid"},
}

ONBOARDING = {
    "laptop": {"tools": [], "asks": [
        "Would you prefer a Mac or a Windows laptop?",
        "Which laptop would you like?",
        "Mac or Windows?",
        "What operating system do you prefer?",
        "Do you want a MacBook or a ThinkPad?",
        "Let me know whether you'd like a Mac or a PC.",
    ], "misses": [
        "Your laptop will arrive before your start date.",
        "I've ordered the laptop.",
        "Laptops are shipped by courier.",
    ]},
    "address": {"tools": [], "asks": [
        "Where should we ship your equipment?",
        "What's your home address?",
        "Could you confirm the shipping address?",
        "Where would you like your laptop delivered?",
        "Please tell me where to send your equipment.",
        "What address should we send your kit to?",
    ], "misses": [
        "Your equipment has shipped.",
        "I've noted your address.",
        "Shipping usually takes two days.",
    ]},
    "start": {"tools": [], "asks": [
        "When is your start date?",
        "What's your first day?",
        "Can you confirm when you start?",
        "Which day do you begin?",
        "Could you remind me of your start date?",
        "When do you start?",
    ], "misses": [
        "Welcome! Your start date is confirmed.",
        "I've booked orientation for your first day.",
        "Everything will be ready before you start.",
    ]},
    "contract": {"tools": ["sign_contract"], "asks": [
        "Please sign your contract.",
        "Could you e-sign the employment contract in your email?",
        "Can you sign the offer letter we sent?",
        "Please review and sign the agreement.",
        "Go ahead and open the e-sign email and sign it.",
        "Your contract is ready: please sign it.",
        "Kindly countersign the employment paperwork.",
        ("Please check your email and sign the contract.", ["check_email"]),
    ], "misses": [
        "I've sent your contract.",
        "Thanks for signing the contract.",
        "Don't sign the contract until you've read it.",
        "Once the contract is signed, I'll create your account.",
    ], "check": lambda c: _one(c, "SELECT status FROM contracts WHERE hire_id = 'H-1'") == "signed"},
    "activate": {"tools": ["activate_account"], "asks": [
        "Please activate your account.",
        "Could you open the activation link and choose a password?",
        "Can you set up your new account password using the link we emailed?",
        "Please pick a password for your work account.",
        "Go ahead and activate your new login.",
        "Kindly complete your account activation.",
        "Please create your password now.",
    ], "misses": [
        "Your activation link expires in 24 hours.",
        "I've activated your VPN group.",
        "Don't activate your account until tomorrow.",
    ], "check": lambda c: _one(c, "SELECT status FROM accounts WHERE hire_id = 'H-1'") == "active"},
    "mfa": {"tools": ["set_up_mfa"], "asks": [
        "Please set up MFA.",
        "Could you enable two-factor authentication?",
        "Can you scan the QR code with your authenticator app?",
        "Please turn on multi-factor authentication for your account.",
        "Now enrol your phone in MFA, please.",
        "Please add the account to your authenticator app.",
    ], "misses": [
        "MFA is required for all staff.",
        "I'll set up your MFA group.",
        "Don't set up MFA yet.",
    ], "check": lambda c: _one(c, "SELECT mfa FROM accounts WHERE hire_id = 'H-1'") == 1},
    "email": {"tools": ["check_email"], "asks": [
        "Please check your email.",
        "Could you look in your personal inbox?",
        "Can you open your mailbox and see if our message arrived?",
        "Have a look at your mail, please.",
        "Would you check your e-mail for a message from us?",
        "Please go to your inbox and look for our message.",
    ], "misses": [
        "I'll email you the details.",
        "Your work email will be sam.ortiz2@acme.example.",
        "Don't check your email yet.",
    ]},
    "screen": {"tools": ["look_at_screen"], "asks": [
        "What do you see on your screen now?",
        "What does the page say?",
        "Could you look at your screen and tell me what it shows?",
        "What's on your screen at the moment?",
        "Please check the screen and describe what's there.",
        "What does your browser show?",
    ], "misses": [
        "Your screen may look different from mine.",
        "Don't worry about the error on the screen.",
        "I can see your account on my screen.",
    ]},
}


# -- shared states where every action can succeed ---------------------------------------------------

def _one(conn, sql):
    return conn.execute(sql).fetchone()[0]


def _dev(conn, key):
    return _one(conn, f"SELECT value FROM device WHERE key = '{key}'")


def _ready_identity(root):
    """Unlocked, MFA reset, a code and a reset link in the mail, the rules told."""
    seed_identity(root)
    conn = sqlite3.connect(root / "state" / "user.sqlite")
    with conn:
        conn.execute("UPDATE accounts SET status = 'active', mfa = 'none', mfa_device = '' WHERE id = 'U1'")
        conn.execute("UPDATE screen SET value = 'mfa_setup' WHERE key = 'page'")
        conn.execute("INSERT INTO reset_links (account_id, destination, status) VALUES ('U1', 'ana88@gmail.com', 'sent')")
        conn.execute("INSERT INTO inbox (to_address, subject, body) VALUES ('ana88@gmail.com', 'Acme verification code', "
                     "'Your Acme verification code is 314159. IT will ask you to read it back.')")
        conn.execute("INSERT INTO conversation (role, text) VALUES ('agent', ?)", (RULES,))
        conn.execute("INSERT INTO conversation (role, text) VALUES ('user', 'Okay.')")
    return conn


def _ready_mobile(root):
    """Airplane mode on, mobile data and roaming off, a wrong APN, 2G only, a bill to approve."""
    seed_mobile(root, airplane=1, mobile_data=0, apn="wap.old.net", suspended=True, network_mode=mobile.SLOW_MODE)
    conn = sqlite3.connect(root / "state" / "user.sqlite")
    with conn:
        conn.execute("INSERT INTO charges (kind, number, bill_id, amount, status) "
                     "VALUES ('bill', '+1 415-555-0142', 'B-1', 35.0, 'pending')")
        conn.execute("INSERT INTO conversation (role, text) VALUES ('agent', 'Hello')")
        conn.execute("INSERT INTO conversation (role, text) VALUES ('user', 'Hi.')")
    return conn


def _ready_onboarding(root, intent):
    """The contract sent; the account created (or, for MFA, activated)."""
    seed_onboarding(root)
    conn = sqlite3.connect(root / "state" / "user.sqlite")
    status = "active" if intent == "mfa" else "pending_activation"
    with conn:
        conn.execute("UPDATE contracts SET status = 'sent' WHERE hire_id = 'H-1'")
        conn.execute("INSERT INTO accounts (username, hire_id, email, groups, status) VALUES "
                     "('sam.ortiz2', 'H-1', 'sam.ortiz2@acme.example', '[\"all-staff\"]', ?)", (status,))
        conn.execute("INSERT INTO conversation (role, text) VALUES ('agent', ?)",
                     ("Your password must be at least 12 characters with an upper-case letter and a digit.",))
        conn.execute("INSERT INTO conversation (role, text) VALUES ('user', 'Okay.')")
    return conn


DOMAINS = {
    "identity": (identity, IDENTITY, lambda root, intent: _ready_identity(root)),
    "mobile": (mobile, MOBILE, lambda root, intent: _ready_mobile(root)),
    "onboarding": (onboarding, ONBOARDING, _ready_onboarding),
}


def _cases(kind):
    out = []
    for dname, (_module, sets, _ready) in DOMAINS.items():
        for intent, spec in sets.items():
            for k, item in enumerate(spec[kind]):
                text, extra = item if isinstance(item, tuple) else (item, [])
                out.append(pytest.param(dname, intent, text, extra, id=f"{dname}-{intent}-{k}"))
    return out


async def _turn(tmp_path, dname, intent, text):
    module, _sets, ready = DOMAINS[dname]
    root = tmp_path / "w"
    (root / "state").mkdir(parents=True)
    ready(root, intent).close()
    db = root / "state" / "user.sqlite"
    await converse(db, text, module)
    conn = sqlite3.connect(db)
    tools = [r[0] for r in conn.execute("SELECT tool FROM actions WHERE actor = 'user' ORDER BY seq")]
    return conn, tools


def test_every_intent_has_a_paraphrase_set():
    for module, sets, _ready in DOMAINS.values():
        assert set(sets) == {i.name for i in module.INTENTS}, module.__name__
        for intent, spec in sets.items():
            assert 6 <= len(spec["asks"]) <= 10 and 3 <= len(spec["misses"]) <= 5, intent


@pytest.mark.parametrize("dname, intent, text, extra", _cases("asks"))
async def test_every_paraphrase_triggers_exactly_its_intent(tmp_path, dname, intent, text, extra):
    module, sets, _ready = DOMAINS[dname]
    spec = sets[intent]
    conn, tools = await _turn(tmp_path, dname, intent, text)
    try:
        if spec["tools"]:
            assert sorted(tools) == sorted(spec["tools"] + extra), f"{text!r} -> {tools}"
            if "check" in spec:
                assert spec["check"](conn), f"{text!r}: the person did not get it done"
        else:
            assert tools == [], f"{text!r} -> {tools}"
            assert [h.intent.name for h in find_hits(module.INTENTS, text)] == [intent], text
    finally:
        conn.close()


@pytest.mark.parametrize("dname, intent, text, extra", _cases("misses"))
async def test_near_misses_trigger_nothing(tmp_path, dname, intent, text, extra):
    module, _sets, _ready = DOMAINS[dname]
    conn, tools = await _turn(tmp_path, dname, intent, text)
    conn.close()
    assert tools == [], f"{text!r} -> {tools}"
    asked = [h.intent.name for h in find_hits(module.INTENTS, text) if h.request or h.intent.kind == "info"]
    assert asked == [], f"{text!r} -> {asked}"
