#!/usr/bin/env python3
"""Writes the outside evaluation set of harness-redaction (`outside.jsonl`) to standard output.

The values come from Faker (https://faker.readthedocs.io, pinned in requirements.txt): its
locale providers write phone numbers, card numbers, IBANs, emails, IPs, SSNs and MAC addresses
the way people in those countries write them, independently of the redaction crate's
detectors. Around them go sentences in each locale's language, JSON records, log lines and
CSV rows, and unlabelled look-alikes that are not entities: dates, times, versions, amounts,
order and invoice ids, timestamps, postcodes and long digit runs.

Everything is seeded, so the same Faker version writes the same file. To regenerate:

    python3 -m venv /tmp/faker-venv
    /tmp/faker-venv/bin/pip install -r plugins/redaction/tests/all/accuracy/requirements.txt
    /tmp/faker-venv/bin/python plugins/redaction/tests/all/accuracy/generate.py \
        > plugins/redaction/tests/all/accuracy/outside.jsonl

Each line is one sample: {"locale", "kind", "text", "labels": [[entity, start, end], ...]}
with byte offsets into the UTF-8 text.
"""

import json
import random
import re
import sys
from datetime import datetime

from faker import Faker

SEED = 14
SAMPLES = 12_000

# Locale -> the language of its sentences.
LOCALES = {
    "en_US": "en",
    "en_CA": "en",
    "en_GB": "en",
    "en_AU": "en",
    "en_IN": "en",
    "de_DE": "de",
    "de_AT": "de",
    "de_CH": "de",
    "fr_FR": "fr",
    "nl_NL": "nl",
    "it_IT": "it",
    "es_ES": "es",
    "pt_BR": "pt",
    "pl_PL": "pl",
    "sv_SE": "sv",
    "ru_RU": "ru",
    "ja_JP": "ja",
}

# Sentences around one value, per language. `{name}` is a person; the other placeholders
# are the values (labelled) or look-alikes (not labelled). Some name the value's kind
# ("phone", "Telefon"), some do not.
PHONE = {
    "en": [
        "You can reach {name} at {phone}.",
        "Phone: {phone}",
        "Call me on {phone} after five.",
        "Please fax the signed form to {phone}.",
        "{name}'s mobile number is {phone}.",
        "Tel. {phone} (office)",
        "{name} - {phone}",
        "Spoke with {name}, follow up at {phone} tomorrow.",
        "The courier will ring {phone} on arrival.",
        "Leave a message for {name} on {phone}.",
        "{phone} is the number we have on file for {name}.",
        "Emergency contact: {name}, {phone}.",
    ],
    "de": [
        "Sie erreichen {name} unter {phone}.",
        "Telefon: {phone}",
        "Rufen Sie mich bitte unter {phone} zurück.",
        "Handy von {name}: {phone}",
        "Fax {phone}",
        "{name}, {phone}, Abteilung Einkauf",
        "Rückfragen gerne an {name} ({phone}).",
    ],
    "fr": [
        "Vous pouvez joindre {name} au {phone}.",
        "Téléphone : {phone}",
        "Appelez-moi au {phone} demain matin.",
        "Portable de {name} : {phone}",
        "{name} — {phone}",
        "Merci de rappeler {name} au {phone}.",
    ],
    "nl": [
        "U kunt {name} bereiken op {phone}.",
        "Telefoon: {phone}",
        "Bel mij terug op {phone}.",
        "Mobiel nummer van {name}: {phone}",
        "{name}, {phone}",
    ],
    "it": [
        "Può contattare {name} al {phone}.",
        "Telefono: {phone}",
        "Mi chiami al {phone} dopo le cinque.",
        "Cellulare di {name}: {phone}",
        "{name}, {phone}",
    ],
    "es": [
        "Puede llamar a {name} al {phone}.",
        "Teléfono: {phone}",
        "Mi móvil es el {phone}.",
        "{name}, {phone}",
        "Contacto de {name}: {phone}",
    ],
    "pt": [
        "Você pode ligar para {name} no {phone}.",
        "Telefone: {phone}",
        "Meu celular é {phone}.",
        "{name} - {phone}",
    ],
    "pl": [
        "Proszę dzwonić do {name} pod numer {phone}.",
        "Telefon: {phone}",
        "Tel. kom. {phone}",
        "{name}, {phone}",
    ],
    "sv": [
        "Du når {name} på {phone}.",
        "Telefon: {phone}",
        "Ring mig på {phone}.",
        "{name}, {phone}",
    ],
    "ru": [
        "Звоните {name} по номеру {phone}.",
        "Телефон: {phone}",
        "Мобильный: {phone}",
        "{name}, {phone}",
    ],
    "ja": [
        "{name}さんの電話番号は{phone}です。",
        "携帯：{phone}",
        "お問い合わせは{phone}までお願いします。",
        "{name} {phone}",
    ],
}

CARD = {
    "en": [
        "Card number: {card}",
        "{name} paid with card {card}.",
        "Charge {card} for the renewal.",
        "Refund issued to {card} today.",
        "{card}",
    ],
    "de": ["Kartennummer: {card}", "Bezahlt mit Kreditkarte {card}."],
    "fr": ["Numéro de carte : {card}", "Payé avec la carte {card}."],
    "nl": ["Kaartnummer: {card}", "Betaald met creditcard {card}."],
    "it": ["Numero di carta: {card}", "Pagato con la carta {card}."],
    "es": ["Número de tarjeta: {card}", "Pagado con la tarjeta {card}."],
    "pt": ["Número do cartão: {card}", "Pago com o cartão {card}."],
    "pl": ["Numer karty: {card}", "Zapłacono kartą {card}."],
    "sv": ["Kortnummer: {card}", "Betalt med kort {card}."],
    "ru": ["Номер карты: {card}", "Оплачено картой {card}."],
    "ja": ["カード番号：{card}", "{card}のカードで支払い済み。"],
}

OTHER = {
    "email": ["Write to {email}.", "E-mail: {email}", "{name} <{email}>", "cc {email}, thanks"],
    "iban": ["IBAN: {iban}", "Please transfer the deposit to {iban}.", "Konto {iban} ({name})"],
    "ip": ["Login from {ip} succeeded.", "client {ip} connected", "blocked {ip} after 5 attempts"],
    "ssn": ["SSN: {ssn}", "Social security number {ssn} is on file.", "{name}, SSN {ssn}"],
    "mac": ["Device {mac} joined the network.", "hw addr {mac}"],
}

# Sentences with look-alikes only: none of their numbers is an entity.
NEGATIVE = [
    "Order #{order} shipped on {date}.",
    "Invoice {invoice} is due on {date}, total {amount}.",
    "Meeting at {time} on {date} in room {small}.",
    "Upgraded to version {version} at {datetime}.",
    "Ticket {ticket} was closed after {small} days.",
    "Timestamp {ts} processed in {small} ms.",
    "Transaction id {longrun}.",
    "Amount due: {amount}",
    "Tracking number {tracking}.",
    "Postcode {postcode}, building {small}.",
    "Balance {amount} as of {date} {time}.",
    "Batch {longrun} held {small} records.",
    "order_id={order} total={amount} at {datetime}",
    "Released {version} ({date}); build {build}.",
]

PHONE_KEYS = ["phone", "phone_number", "tel", "mobile", "contact", "fax", "telefon", "work", "primary"]
CARD_KEYS = ["card", "card_number", "pan", "cc", "payment"]
OTHER_KEYS = {
    "email": ["email", "mail", "contact"],
    "iban": ["iban", "account"],
    "ip": ["ip", "client_ip", "remote_addr"],
    "ssn": ["ssn"],
    "mac": ["mac", "hw_addr"],
}
LABEL = {
    "phone": "PHONE_NUMBER",
    "card": "CREDIT_CARD",
    "email": "EMAIL_ADDRESS",
    "iban": "IBAN_CODE",
    "ip": "IP_ADDRESS",
    "ssn": "US_SSN",
    "mac": "MAC_ADDRESS",
}
DATE_FORMATS = ["%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y", "%d/%m/%Y", "%d-%m-%Y", "%Y/%m/%d", "%Y%m%d"]


class Generator:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.fakers = {}
        for i, locale in enumerate(LOCALES):
            fake = Faker(locale)
            fake.seed_instance(seed * 1000 + i)
            self.fakers[locale] = fake
        self.us = self.fakers["en_US"]

    def card(self, fake):
        number = fake.credit_card_number()
        style = self.rng.random()
        if style < 0.55:
            return number
        sep = " " if style < 0.85 else "-"
        if len(number) in (14, 15):
            sizes = [4, 6, len(number) - 10]
        else:
            sizes = [4] * (len(number) // 4) + ([len(number) % 4] if len(number) % 4 else [])
        out, at = [], 0
        for size in sizes:
            out.append(number[at : at + size])
            at += size
        return sep.join(out)

    def iban(self, fake):
        iban = fake.iban()
        if self.rng.random() < 0.5:
            return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
        return iban

    def ip(self, fake):
        r = self.rng.random()
        if r < 0.45:
            return fake.ipv4_public()
        if r < 0.7:
            return fake.ipv4_private()
        return fake.ipv6()

    def mac(self, fake):
        mac = fake.mac_address()
        r = self.rng.random()
        if r < 0.3:
            return mac.upper().replace(":", "-")
        return mac

    def value(self, kind, locale):
        fake = self.fakers[locale]
        if kind == "phone":
            return fake.phone_number()
        if kind == "card":
            return self.card(fake)
        if kind == "email":
            return fake.email()
        if kind == "iban":
            return self.iban(fake)
        if kind == "ip":
            return self.ip(fake)
        if kind == "ssn":
            return self.us.ssn()
        if kind == "mac":
            return self.mac(fake)
        return self.lookalike(kind, fake)

    @staticmethod
    def moment(fake):
        # Fixed bounds: Faker's default ones end today, which would change the file daily.
        return fake.date_time_between(datetime(1970, 1, 1), datetime(2035, 1, 1))

    def lookalike(self, kind, fake):
        rng = self.rng
        if kind == "name":
            return fake.name()
        if kind == "order":
            return str(rng.randrange(10**5, 10**12))
        if kind == "invoice":
            return rng.choice(
                [
                    f"INV-{rng.randrange(2015, 2030)}-{rng.randrange(0, 10**6):06d}",
                    f"{rng.randrange(2015, 2030)}-{rng.randrange(0, 10**5):05d}",
                    f"RE{rng.randrange(10**7, 10**9)}",
                    f"no. {rng.randrange(10**6, 10**10)}",
                ]
            )
        if kind == "date":
            return self.moment(fake).strftime(rng.choice(DATE_FORMATS))
        if kind == "time":
            return self.moment(fake).strftime(rng.choice(["%H:%M", "%H:%M:%S", "%H.%M"]))
        if kind == "datetime":
            return self.moment(fake).isoformat()
        if kind == "version":
            parts = [str(rng.randrange(0, 30)) for _ in range(rng.choice([2, 3, 3, 4]))]
            return rng.choice(["", "v"]) + ".".join(parts)
        if kind == "build":
            return f"{rng.randrange(1, 30)}.{rng.randrange(0, 12)}.{rng.randrange(1000, 99999)}"
        if kind == "amount":
            return fake.pricetag() if rng.random() < 0.7 else f"{rng.randrange(1000, 10**7):,}.{rng.randrange(100):02d}"
        if kind == "ticket":
            return rng.choice([f"{rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}", f"#{rng.randrange(10**4, 10**8)}"])
        if kind == "ts":
            return str(rng.randrange(10**9, 2 * 10**9) * rng.choice([1, 1000]))
        if kind == "longrun":
            return "".join(rng.choice("0123456789") for _ in range(rng.randrange(20, 40)))
        if kind == "tracking":
            return "1Z" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(16))
        if kind == "postcode":
            return fake.postcode()
        if kind == "small":
            return str(rng.randrange(1, 500))
        raise ValueError(kind)


PLACEHOLDER = re.compile(r"\{(\w+)\}")


class Sample:
    """Text built piece by piece, with labelled byte spans."""

    def __init__(self):
        self.parts = []
        self.len = 0
        self.labels = []

    def text(self, piece):
        self.parts.append(piece)
        self.len += len(piece.encode())

    def entity(self, kind, value):
        start = self.len
        self.text(value)
        self.labels.append([LABEL[kind], start, self.len])

    def fill(self, gen, template, locale, values=None):
        """Appends `template` with its placeholders filled (values given or generated)."""
        values = values or {}
        at = 0
        for m in PLACEHOLDER.finditer(template):
            self.text(template[at : m.start()])
            kind = m.group(1)
            value = values.get(kind) or gen.value(kind, locale)
            if kind in LABEL:
                self.entity(kind, value)
            else:
                self.text(value)
            at = m.end()
        self.text(template[at:])

    def done(self, locale, kind):
        return {"locale": locale, "kind": kind, "text": "".join(self.parts), "labels": self.labels}


def pick_kind(gen, locale):
    kinds = ["phone"] * 9 + ["card"] * 4 + ["email", "iban", "ip", "mac"] * 1 + ["negative"] * 3
    if locale == "en_US":
        kinds.append("ssn")
    return gen.rng.choice(kinds)


def sentence(gen, locale):
    lang = LOCALES[locale]
    sample = Sample()
    for i in range(gen.rng.choice([1, 2, 2, 3])):
        if i:
            sample.text(" ")
        kind = pick_kind(gen, locale)
        if kind == "phone":
            template = gen.rng.choice(PHONE[lang])
        elif kind == "card":
            template = gen.rng.choice(CARD[lang])
        elif kind == "negative":
            template = gen.rng.choice(NEGATIVE)
        else:
            template = gen.rng.choice(OTHER[kind])
        sample.fill(gen, template, locale)
    return sample.done(locale, "sentence")


def quoted(sample, gen, kind, locale, quote):
    if kind in LABEL:
        sample.text(quote)
        sample.entity(kind, gen.value(kind, locale))
        sample.text(quote)
    else:
        value = gen.value(kind, locale)
        sample.text(f"{quote}{value}{quote}" if quote or " " in value else value)


def key_for(gen, kind):
    if kind == "phone":
        return gen.rng.choice(PHONE_KEYS)
    if kind == "card":
        return gen.rng.choice(CARD_KEYS)
    return gen.rng.choice(OTHER_KEYS[kind])


def json_record(gen, locale):
    sample = Sample()
    sample.text('{"id": ' + str(gen.rng.randrange(1, 10**6)) + ', "name": ')
    sample.text(json.dumps(gen.value("name", locale), ensure_ascii=False))
    fields = [k for k in (pick_kind(gen, locale) for _ in range(gen.rng.choice([1, 2]))) if k != "negative"]
    for kind in fields:
        sample.text(f', "{key_for(gen, kind)}": ')
        quoted(sample, gen, kind, locale, '"')
    for key, kind in gen.rng.sample(
        [("order_id", "order"), ("updated_at", "datetime"), ("version", "version"), ("ts", "ts"), ("total", "amount"), ("zip", "postcode")],
        2,
    ):
        sample.text(f', "{key}": ')
        quoted(sample, gen, kind, locale, '"' if kind not in ("order", "ts") else "")
    sample.text("}")
    return sample.done(locale, "json")


def log_line(gen, locale):
    sample = Sample()
    sample.text(gen.value("datetime", locale) + " " + gen.rng.choice(["INFO", "WARN", "DEBUG", "ERROR"]) + " ")
    sample.text(gen.rng.choice(["[notify]", "[billing]", "[auth]", "[crm-sync]", "[worker-3]"]) + " ")
    kind = pick_kind(gen, locale)
    if kind == "negative":
        sample.fill(gen, gen.rng.choice(NEGATIVE), locale)
    else:
        sample.text(gen.rng.choice(["updated", "sent", "lookup", "stored", "verified"]) + " ")
        sample.text(key_for(gen, kind) + "=")
        value = gen.value(kind, locale)
        quote = '"' if " " in value else ""
        sample.text(quote)
        sample.entity(kind, value)
        sample.text(quote)
    sample.text(f" took={gen.rng.randrange(1, 3000)}ms req={gen.value('order', locale)}")
    return sample.done(locale, "log")


def csv_rows(gen, locale):
    sample = Sample()
    kinds = [k for k in (pick_kind(gen, locale) for _ in range(2)) if k != "negative"] or ["phone"]
    header = ["name"] + [key_for(gen, k) for k in kinds] + ["date", "amount"]
    sample.text(",".join(header) + "\n")
    for row in range(gen.rng.choice([1, 2])):
        if row:
            sample.text("\n")
        sample.text(gen.value("name", locale).replace(",", " "))
        for kind in kinds:
            sample.text(",")
            sample.entity(kind, gen.value(kind, locale))
        sample.text("," + gen.value("date", locale) + ",")
        sample.text('"' + gen.value("amount", locale) + '"')
    return sample.done(locale, "csv")


def main():
    gen = Generator(SEED)
    writers = [sentence] * 4 + [json_record] * 2 + [log_line] * 2 + [csv_rows] * 2
    locales = list(LOCALES)
    out = sys.stdout
    for i in range(SAMPLES):
        locale = locales[i % len(locales)]
        record = gen.rng.choice(writers)(gen, locale)
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
