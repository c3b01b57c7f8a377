"""Planted secrets of every kind the redactor knows, and real strings it must leave alone (tau-bench airline)."""

from __future__ import annotations

# (kind, how it appears in text, the secret string that must never be stored)
SECRETS: list[tuple[str, str, str]] = [
    ("aws key id", "AKIAIOSFODNN7EXAMPLQ", "AKIAIOSFODNN7EXAMPLQ"),
    ("aws secret key=value", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKQY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKQY"),
    ("aws secret bare", "secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYZZAMPLEKYZ here",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYZZAMPLEKYZ"),
    ("github classic", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    ("github oauth", "gho_16C7e42F292c6912E7710c838347Ae178B4b", "gho_16C7e42F292c6912E7710c838347Ae178B4b"),
    ("github server", "ghs_16C7e42F292c6912E7710c838347Ae178B4c", "ghs_16C7e42F292c6912E7710c838347Ae178B4c"),
    ("github fine-grained", "github_pat_11ABCDEFG0abcdefghijkl_mnopQRSTUVwxyz0123456789ABCDEFGHIJKLMNOPQRS",
     "github_pat_11ABCDEFG0abcdefghijkl_mnopQRSTUVwxyz0123456789ABCDEFGHIJKLMNOPQRS"),
    ("slack bot", "xoxb-2048-4096-AbCdEfGhIjKlMnOp", "xoxb-2048-4096-AbCdEfGhIjKlMnOp"),
    ("slack user", "xoxp-1111-2222-3333-aBcDeFgHiJ", "xoxp-1111-2222-3333-aBcDeFgHiJ"),
    ("stripe live", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe restricted", "rk_live_51H8aBcDeFgHiJkLmN0pQr", "rk_live_51H8aBcDeFgHiJkLmN0pQr"),
    ("stripe test", "sk_test_BQokikJOvBiI2HlWgH4olfQ2", "sk_test_BQokikJOvBiI2HlWgH4olfQ2"),
    ("google api key", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ("openai key", "sk-proj-Abc123Def456Ghi789Jkl012", "sk-proj-Abc123Def456Ghi789Jkl012"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("bearer", "Authorization: Bearer Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1", "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1"),
    ("password sentence", "my password is Tr0ub4dor&3.", "Tr0ub4dor&3"),
    ("passcode sentence", "the passcode is 884213", "884213"),
    ("pwd colon", "pwd: hunter2hunter2", "hunter2hunter2"),
    ("password key=value", "db_password=S3cr3tPassW0rd!", "S3cr3tPassW0rd!"),
    ("pem", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAqPEMBODYSECRETLINE\n-----END RSA PRIVATE KEY-----",
     "MIIEowIBAAKCAQEAqPEMBODYSECRETLINE"),
    ("url password", "postgres://admin:UrlPa55word@db.internal:5432/app", "UrlPa55word"),
    ("us ssn", "SSN 123-45-6789 on file", "123-45-6789"),
    ("iban", "pay to GB82 WEST 1234 5698 7654 32 today", "GB82 WEST 1234 5698 7654 32"),
    ("iban compact", "IBAN DE89370400440532013000.", "DE89370400440532013000"),
    ("card", "card 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111"),
    ("email", "write to jane.doe@example.org", "jane.doe@example.org"),
    ("us phone", "call (415) 555-0132", "555-0132"),
    ("cn mobile", "我的手机号是13812345678，请回电", "13812345678"),
    ("cn mobile spaced", "电话 +86 139 1234 5678", "139 1234 5678"),
    ("cn id", "身份证号11010519491231002X已登记", "11010519491231002X"),
    ("cn password", "我的密码是abc12345，别告诉别人", "abc12345"),
]

# Real strings from ../shared/data/tau_bench_airline (flight numbers, reservation ids, dates, amounts, ids) and
# other look-alikes: none of them may be touched.
MUST_KEEP: list[str] = [
    "HAT030", "HAT005", "ZFA04Y", "1N99U6", "4XGCCM", "59XX6W", "2024-05-15", "2024-05-01T00:08:44",
    "2024-05-01T09:08:54.123456+00:00", "$1,000", "$1,016.", "$2,345.67", "credit_card_2198526",
    "certificate_2765295", "gift_card_7219486", "aarav_ahmed_6699", "#W2378156", "order #W8732376",
    "550e8400-e29b-41d4-a716-446655440000", "3fa85f64-5717-4562-b3fc-2c963f66afa6", "flight HAT030 on 2024-05-15",
    "the total is 1234.56 USD", "baggage 2 items, 50 kg", "seat 12A", "CA1234", "MU5101", "20240515",
    "1717171717", "the password must be changed", "reset your password", "max_tokens=256",
    "git 3f786850e387550fdab836ed7e6dc881de23001b", "/usr/local/lib/python3.11/site-packages",
    "price 12345678 cents", "id 2024-0515-001", "room 404-12-1",
]
