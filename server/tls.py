"""TLS for `bergen serve`: the certificate and key it presents, the CA its clients' certificates
must chain to under mutual TLS, and which listen addresses may go without TLS."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization


class TlsSettingsError(ValueError):
    """A TLS file that cannot be used: missing, unreadable, not PEM, or a key that is not the
    certificate's."""


@dataclass(frozen=True)
class ServerTls:
    """PEM bytes, checked: `key` belongs to the first certificate of `cert_chain`."""

    cert_chain: bytes
    key: bytes
    client_ca: bytes | None = None
    """When set, a client must present a certificate signed by one of these CAs."""

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def _read(option: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsSettingsError(f"{option} {path}: {e.strerror or e}") from None


def _certificates(option: str, path: str) -> tuple[bytes, list[x509.Certificate]]:
    data = _read(option, path)
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsSettingsError(f"{option} {path}: not a PEM certificate") from None
    return data, certs


def load_server_tls(cert: str | None, key: str | None, client_ca: str | None) -> ServerTls | None:
    """The server's TLS from its files, None when none is given.

    Raises TlsSettingsError for a certificate without a key (or the other way round), a client
    CA without them, a file that cannot be read or parsed, an encrypted key, or a key that does
    not match the certificate.
    """
    if cert is None and key is None:
        if client_ca is not None:
            raise TlsSettingsError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise TlsSettingsError("--tls-cert and --tls-key go together: give both")
    chain, certs = _certificates("--tls-cert", cert)
    key_pem = _read("--tls-key", key)
    try:
        private = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise TlsSettingsError(f"--tls-key {key}: an encrypted key; give it unencrypted") from None
    except ValueError:
        raise TlsSettingsError(f"--tls-key {key}: not a PEM private key") from None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if private.public_key().public_bytes(der, spki) != certs[0].public_key().public_bytes(
        der, spki
    ):
        raise TlsSettingsError(f"--tls-key {key} is not the key of --tls-cert {cert}")
    ca = _certificates("--tls-client-ca", client_ca)[0] if client_ca is not None else None
    return ServerTls(chain, key_pem, ca)


def is_local(listen: str) -> bool:
    """Whether `listen` (HOST:PORT, or a unix: socket) can only be reached from this machine:
    a loopback address, `localhost`, or a Unix socket. An address for every interface
    (0.0.0.0, [::], an empty host) or any other name is not."""
    if listen.startswith(("unix:", "unix-abstract:")):
        return True
    host = listen.rpartition(":")[0] if ":" in listen else listen
    host = host.removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
