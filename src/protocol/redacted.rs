//! `Debug` for the messages that carry credentials: everything but the credentials, so a
//! command logged or shown in a panic message never leaks a token or a password.

use std::fmt;

use super::pb::{AuthData, CommandConnect};

fn shown(secret: &Option<impl AsRef<[u8]>>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}

impl fmt::Debug for CommandConnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CommandConnect")
            .field("client_version", &self.client_version)
            .field("auth_method_name", &self.auth_method_name)
            .field("auth_data", &shown(&self.auth_data))
            .field("protocol_version", &self.protocol_version)
            .field("proxy_to_broker_url", &self.proxy_to_broker_url)
            .field("original_principal", &self.original_principal)
            .field("original_auth_data", &shown(&self.original_auth_data))
            .field("original_auth_method", &self.original_auth_method)
            .field("feature_flags", &self.feature_flags)
            .field("proxy_version", &self.proxy_version)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for AuthData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthData")
            .field("auth_method_name", &self.auth_method_name)
            .field("auth_data", &shown(&self.auth_data))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::pb::{base_command::Type, BaseCommand, CommandAuthResponse};
    use super::*;

    #[test]
    fn commands_carrying_credentials_never_print_them() {
        let connect = BaseCommand {
            r#type: Type::Connect as i32,
            connect: Some(CommandConnect {
                client_version: "magnetar".into(),
                auth_method_name: Some("token".into()),
                auth_data: Some(bytes::Bytes::from_static(b"s3cret-token")),
                original_auth_data: Some("s3cret-original".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let auth = CommandAuthResponse {
            response: Some(AuthData {
                auth_method_name: Some("token".into()),
                auth_data: Some(bytes::Bytes::from_static(b"s3cret-refresh")),
            }),
            ..Default::default()
        };
        let printed = format!("{connect:?} {auth:?} {connect:#?}");
        assert!(!printed.contains("s3cret"), "{printed}");
        assert!(printed.contains("<redacted>") && printed.contains("token"), "{printed}");
    }
}
