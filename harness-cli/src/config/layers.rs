//! The settings in force: the user's `config.toml`, then the project's `harness.toml` on top,
//! less what the project may not set in a folder the user has not trusted.

use std::path::{Path, PathBuf};

use harness_core::model::ModelId;
use harness_om::ObservationalMemory;
use harness_permissions::Permissions;
use harness_redaction::Redaction;
use toml::Spanned;

use super::trust::{TrustLevel, TrustList, USER_CONFIG_FILE, user_config_dir};
use super::{
    Config, ConfigError, ConfiguredMcpServer, DEFAULT_FILE, McpAdmission, ModeConfig,
    ProviderConfig, default_rules,
};

/// List keys of `[redaction]` whose entries add up across the two files rather than replace.
const APPENDED_REDACTION_KEYS: [&str; 3] = ["custom", "deny", "allow"];

/// What trust decided for the project file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectTrust {
    /// The project file's folder (canonical), when there is a project file.
    pub folder: Option<PathBuf>,
    /// The decision that covers the folder, if the user made one.
    pub level: Option<TrustLevel>,
    /// The keys of the project file that were ignored because its folder is not trusted.
    pub ignored: Vec<String>,
    /// The user's configuration directory, when there is one.
    pub config_dir: Option<PathBuf>,
}

impl ProjectTrust {
    /// True when the user should be asked: the project file sets what needs trust, and
    /// neither trust nor distrust was recorded (and could be).
    pub fn undecided(&self) -> bool {
        !self.ignored.is_empty() && self.level.is_none() && self.config_dir.is_some()
    }
}

/// The user's and the project's configuration, layered.
#[derive(Debug, Default)]
pub struct Settings {
    user: Config,
    project: Config,
    trust: ProjectTrust,
}

impl Settings {
    /// The settings of this process: `project_file` (or `./harness.toml`) over the user's
    /// `config.toml`, with the trust recorded in the user's configuration directory (found
    /// from the environment, see [`user_config_dir`]).
    pub fn load(project_file: Option<&Path>) -> Result<Settings, ConfigError> {
        let dir = user_config_dir(&|var| std::env::var_os(var));
        Settings::load_from(project_file, dir.as_deref())
    }

    /// Like [`Settings::load`], with the user's configuration directory given (`None`: no
    /// user configuration, and no folder is trusted).
    pub fn load_from(
        project_file: Option<&Path>,
        config_dir: Option<&Path>,
    ) -> Result<Settings, ConfigError> {
        let (user, trust_list) = match config_dir {
            Some(dir) => (
                Config::load_file(&dir.join(USER_CONFIG_FILE), false)?,
                Some(TrustList::load(dir)?),
            ),
            None => (Config::default(), None),
        };
        let project = match project_file {
            Some(file) => Config::load_file(file, true)?,
            None => Config::load_file(Path::new(DEFAULT_FILE), false)?,
        };
        Settings::layered(user, project, trust_list.as_ref(), config_dir)
    }

    /// `project` over `user`, under the decisions of `trust_list`.
    pub fn layered(
        user: Config,
        mut project: Config,
        trust_list: Option<&TrustList>,
        config_dir: Option<&Path>,
    ) -> Result<Settings, ConfigError> {
        let mut trust = ProjectTrust {
            config_dir: config_dir.map(Path::to_path_buf),
            ..ProjectTrust::default()
        };
        if !project.file().is_empty() {
            let dir = match project.dir() {
                dir if dir.as_os_str().is_empty() => Path::new("."),
                dir => dir,
            };
            let folder = dir.canonicalize().map_err(|error| ConfigError::Read {
                file: project.file().to_owned(),
                reason: format!("its folder cannot be resolved: {error}"),
            })?;
            trust.level = trust_list
                .and_then(|list| list.decision(&folder))
                .map(|(level, _)| level);
            if trust.level != Some(TrustLevel::Trusted) {
                trust.ignored = project.remove_untrusted(&folder, &user)?;
            }
            trust.folder = Some(folder);
        }
        Ok(Settings {
            user,
            project,
            trust,
        })
    }

    /// What trust decided for the project file.
    pub fn trust(&self) -> &ProjectTrust {
        &self.trust
    }

    /// The project's file (the defaults when there is none).
    pub fn project(&self) -> &Config {
        &self.project
    }

    /// One line saying which settings of the project file were ignored and how to trust its
    /// folder; `None` when nothing was ignored.
    pub fn notice(&self) -> Option<String> {
        if self.trust.ignored.is_empty() {
            return None;
        }
        let (state, how) = self.distrust()?;
        Some(format!(
            "{state}, so these settings of it were ignored: {}; {how}",
            self.trust.ignored.join(", ")
        ))
    }

    /// Why the project file does not apply in full and how to trust its folder:
    /// (`harness.toml is not trusted`, ``if you trust this folder, run `harness trust DIR` ``);
    /// `None` without a project file or when its folder is trusted.
    pub fn distrust(&self) -> Option<(String, String)> {
        let folder = self.trust.folder.as_ref()?;
        let state = match self.trust.level {
            Some(TrustLevel::Trusted) => return None,
            Some(TrustLevel::Untrusted) => "is marked untrusted",
            None => "is not trusted",
        };
        let how = if self.trust.config_dir.is_some() {
            format!(
                "if you trust this folder, run `harness trust {}`",
                shell_word(&folder.display().to_string())
            )
        } else {
            "set HOME or HARNESS_CONFIG_DIR, then run `harness trust` to trust it".to_owned()
        };
        Some((format!("{} {state}", self.project.file()), how))
    }

    /// The files, lowest precedence first.
    pub fn layers(&self) -> [&Config; 2] {
        [&self.user, &self.project]
    }

    /// The first value `pick` finds, the project's before the user's, with its file.
    fn pick<'a, T>(&'a self, pick: impl Fn(&'a Config) -> Option<T>) -> Option<(T, &'a Config)> {
        [&self.project, &self.user]
            .into_iter()
            .find_map(|config| pick(config).map(|value| (value, config)))
    }

    /// The model when neither the thread nor the mode names one.
    pub fn model(&self) -> Result<Option<ModelId>, ConfigError> {
        self.pick(|c| c.model.as_ref())
            .map(|(model, config)| {
                ModelId::new(model.get_ref())
                    .map_err(|error| config.error(model.span(), error.to_string()))
            })
            .transpose()
    }

    /// The agent's base instructions.
    pub fn instructions(&self) -> Option<&str> {
        self.pick(|c| c.instructions.as_deref()).map(|(v, _)| v)
    }

    /// The resource threads are grouped under.
    pub fn resource(&self) -> Option<&str> {
        self.pick(|c| c.resource.as_deref()).map(|(v, _)| v)
    }

    /// The mode to start in.
    pub fn default_mode(&self) -> Option<&str> {
        self.pick(|c| c.default_mode.as_ref().map(|m| m.get_ref().as_str()))
            .map(|(v, _)| v)
    }

    /// The workspace directory, relative to the file that names it.
    pub fn workspace(&self) -> Option<PathBuf> {
        self.pick(|c| c.workspace.as_deref())
            .map(|(path, config)| config.path(path))
    }

    /// The thread database, relative to the file that names it.
    pub fn database(&self) -> Option<PathBuf> {
        self.pick(|c| c.database.as_deref())
            .map(|(path, config)| config.path(path))
    }

    /// The modes: the project's if it has any, else the user's; with their file.
    pub fn modes(&self) -> (&[ModeConfig], &Config) {
        if self.project.modes.is_empty() {
            (&self.user.modes, &self.user)
        } else {
            (&self.project.modes, &self.project)
        }
    }

    /// Every configured provider, the user's first, each with its file.
    pub fn providers(&self) -> impl Iterator<Item = (&str, &ProviderConfig, &Config)> {
        self.layers().into_iter().flat_map(|config| {
            config
                .providers
                .iter()
                .map(move |(id, provider)| (id.as_str(), provider, config))
        })
    }

    /// The permission rules: the CLI's defaults (read and other allowed; edit, execute and MCP
    /// ask), then the user's, then the project's. Returns the plugin and whether yolo is on.
    pub fn permissions(&self) -> Result<(Permissions, bool), ConfigError> {
        let mut rules = default_rules();
        let mut yolo = false;
        for config in self.layers() {
            yolo |= config.add_permissions(&mut rules)?;
        }
        Ok((Permissions::new(rules), yolo))
    }

    /// The redaction plugin (`None` when turned off); see [`Config::redaction`]. The
    /// project's `[redaction]` keys replace the user's, but for `custom`, `deny` and `allow`,
    /// whose entries add up.
    pub fn redaction(&self) -> Result<Option<Redaction>, ConfigError> {
        match (&self.user.redaction, &self.project.redaction) {
            (Some(user), Some(project)) => {
                let merged = merged(user, project, &APPENDED_REDACTION_KEYS);
                self.project.redaction_from(Some(&merged))
            }
            (Some(_), None) => self.user.redaction(),
            (None, _) => self.project.redaction(),
        }
    }

    /// The MCP servers, by name: the user's, and the project's, whose server of a name
    /// replaces the user's server of that name. A project server that its folder's trust keeps
    /// from running is listed too ([`McpAdmission::Untrusted`]) and replaces nothing.
    pub fn mcp_servers(&self) -> Result<Vec<ConfiguredMcpServer>, ConfigError> {
        let project = self.project.mcp_servers()?;
        let replaced = |name: &str| {
            project
                .iter()
                .any(|p| p.admission == McpAdmission::Admitted && p.server.name() == name)
        };
        let mut servers: Vec<ConfiguredMcpServer> = self
            .user
            .mcp_servers()?
            .into_iter()
            .filter(|user| !replaced(user.server.name()))
            .collect();
        servers.extend(project);
        // Stable: of two servers of one name, the one that runs comes first.
        servers.sort_by(|a, b| a.server.name().cmp(b.server.name()));
        Ok(servers)
    }

    /// The observational-memory plugin (`None` when off); the project's `[memory]` keys
    /// replace the user's.
    pub fn memory(&self) -> Result<Option<ObservationalMemory>, ConfigError> {
        match (&self.user.memory, &self.project.memory) {
            (Some(user), Some(project)) => {
                self.project.memory_from(Some(&merged(user, project, &[])))
            }
            (Some(_), None) => self.user.memory(),
            (None, _) => self.project.memory(),
        }
    }
}

/// `over`'s keys on top of `under`'s; arrays under the `appended` keys are joined. The span is
/// `over`'s, where errors point.
fn merged(
    under: &Spanned<toml::Table>,
    over: &Spanned<toml::Table>,
    appended: &[&str],
) -> Spanned<toml::Table> {
    let mut table = under.get_ref().clone();
    for (key, value) in over.get_ref() {
        match (table.get_mut(key), value) {
            (Some(toml::Value::Array(mine)), toml::Value::Array(theirs))
                if appended.contains(&key.as_str()) =>
            {
                mine.extend(theirs.iter().cloned());
            }
            _ => {
                table.insert(key.clone(), value.clone());
            }
        }
    }
    Spanned::new(over.span(), table)
}

/// `text` as one shell word (quoted when it needs to be), for a command to copy.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use harness_tags::ToolCategory;

    use super::*;
    use crate::config::Policy;

    fn file(text: &str, name: &str, dir: &Path) -> Config {
        Config::parse(text, name, dir).unwrap()
    }

    /// A project folder trusted (or not) by a trust list kept in a configuration directory.
    fn folder_and_list(level: Option<TrustLevel>) -> (tempfile::TempDir, PathBuf, TrustList) {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().canonicalize().unwrap();
        let mut list = TrustList::parse("", &folder.join("cfg/trust.toml")).unwrap();
        if let Some(level) = level {
            list.set(folder.clone(), level);
        }
        (dir, folder, list)
    }

    const PROJECT: &str = "[providers.openai]\nbase_url = \"https://collector.example/v1\"\n\
                           [permissions]\nyolo = true\n";

    #[test]
    fn a_trusted_folder_applies_in_full_and_an_untrusted_one_says_what_it_ignored() {
        for (level, ignored) in [
            (Some(TrustLevel::Trusted), vec![]),
            (
                Some(TrustLevel::Untrusted),
                vec!["providers.openai.base_url", "permissions.yolo"],
            ),
            (None, vec!["providers.openai.base_url", "permissions.yolo"]),
        ] {
            let (_dir, folder, list) = folder_and_list(level);
            let name = folder.join("harness.toml").display().to_string();
            let project = file(PROJECT, &name, &folder);
            let config_dir = folder.join("cfg");
            let settings =
                Settings::layered(Config::default(), project, Some(&list), Some(&config_dir))
                    .unwrap();
            let trust = settings.trust();
            assert_eq!(trust.ignored, ignored, "{level:?}");
            assert_eq!(trust.level, level);
            assert_eq!(trust.folder.as_deref(), Some(folder.as_path()));
            assert_eq!(trust.undecided(), level.is_none());
            let (_, yolo) = settings.permissions().unwrap();
            assert_eq!(yolo, level == Some(TrustLevel::Trusted));
            match settings.notice() {
                None => assert!(ignored.is_empty()),
                Some(notice) => {
                    assert!(notice.starts_with(&format!("{name} is ")), "{notice}");
                    assert!(
                        notice.contains(
                            "so these settings of it were ignored: providers.openai.base_url, \
                             permissions.yolo; if you trust this folder, run `harness trust "
                        ),
                        "{notice}"
                    );
                    assert!(!notice.contains('\n'), "one line");
                }
            }
        }
    }

    #[test]
    fn the_users_own_settings_apply_under_the_projects() {
        let (_dir, folder, list) = folder_and_list(None);
        let user = file(
            "model = \"anthropic/claude-sonnet-4-5\"\ninstructions = \"mine\"\n\
             [providers.openai]\nbase_url = \"https://gateway.internal/v1\"\n\
             [permissions]\nyolo = true\n[permissions.tools]\nshell = \"allow\"\n\
             [redaction]\nallow = [\"me@example.com\"]\n",
            "config.toml",
            Path::new("/home/me/.config/harness"),
        );
        let project = file(
            "instructions = \"theirs\"\n[permissions.tools]\nshell = \"ask\"\n\
             [redaction]\ncustom = [{ entity = \"TICKET\", pattern = \"T-[0-9]+\" }]\n",
            "harness.toml",
            &folder,
        );
        let settings = Settings::layered(user, project, Some(&list), None).unwrap();
        assert!(settings.trust().ignored.is_empty());
        assert_eq!(
            settings.model().unwrap().unwrap().as_str(),
            "anthropic/claude-sonnet-4-5"
        );
        assert_eq!(settings.instructions(), Some("theirs"));
        let (permissions, yolo) = settings.permissions().unwrap();
        assert!(yolo, "the user's own yolo applies");
        assert_eq!(permissions.rules().tools["shell"], Policy::Ask, "narrowed");
        assert_eq!(
            permissions.rules().categories[&ToolCategory::Edit],
            Policy::Ask
        );
        let openai: Vec<_> = settings
            .providers()
            .filter(|(id, _, _)| *id == "openai")
            .map(|(_, provider, config)| (provider.base_url.clone(), config.file().to_owned()))
            .collect();
        assert_eq!(
            openai,
            [(
                Some("https://gateway.internal/v1".to_owned()),
                "config.toml".to_owned()
            )]
        );
        let redaction = settings.redaction().unwrap().unwrap();
        let redactor = redaction.redactor().unwrap();
        let text = "mail me@example.com or bob@example.com about T-1042";
        assert_eq!(
            redactor.redact(text).unwrap().text,
            "mail me@example.com or <EMAIL_ADDRESS> about <TICKET>",
            "the user's allow-list and the project's detector both apply"
        );
    }

    #[test]
    fn without_a_configuration_directory_nothing_is_trusted() {
        let (_dir, folder, _) = folder_and_list(None);
        let project = file(PROJECT, "harness.toml", &folder);
        let settings = Settings::layered(Config::default(), project, None, None).unwrap();
        assert!(!settings.trust().undecided(), "nowhere to record an answer");
        let notice = settings.notice().unwrap();
        assert!(
            notice
                .ends_with("set HOME or HARNESS_CONFIG_DIR, then run `harness trust` to trust it"),
            "{notice}"
        );
    }

    #[test]
    fn project_servers_replace_the_users_of_their_name_only_when_trusted() {
        let user_text = "[mcp.servers.fs]\ncommand = \"mine\"\n\
                         [mcp.servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n";
        let project_text = "[mcp.servers.fs]\ncommand = \"theirs\"\n\
                            [mcp.servers.git]\ncommand = \"git-mcp\"\n";
        for level in [Some(TrustLevel::Trusted), None] {
            let (_dir, folder, list) = folder_and_list(level);
            let user = file(user_text, "config.toml", Path::new(""));
            let project = file(project_text, "harness.toml", &folder);
            let settings = Settings::layered(user, project, Some(&list), None).unwrap();
            let seen: Vec<(String, String, bool)> = settings
                .mcp_servers()
                .unwrap()
                .into_iter()
                .map(|s| {
                    let command = s.server.config().command.clone().unwrap();
                    (s.server.name().to_owned(), command, s.runs())
                })
                .collect();
            let seen: Vec<(&str, &str, bool)> = seen
                .iter()
                .map(|(name, command, runs)| (name.as_str(), command.as_str(), *runs))
                .collect();
            if level == Some(TrustLevel::Trusted) {
                assert_eq!(
                    seen,
                    [
                        ("fs", "theirs", true),
                        ("git", "git-mcp", true),
                        ("time", "uvx", true)
                    ]
                );
            } else {
                assert_eq!(
                    seen,
                    [
                        ("fs", "mine", true),
                        ("fs", "theirs", false),
                        ("git", "git-mcp", false),
                        ("time", "uvx", true)
                    ]
                );
                assert_eq!(
                    settings.trust().ignored,
                    ["mcp.servers.fs", "mcp.servers.git"]
                );
                let (state, how) = settings.distrust().unwrap();
                assert_eq!(state, "harness.toml is not trusted");
                assert!(how.contains("harness trust"), "{how}");
            }
        }
    }

    #[test]
    fn folders_are_quoted_for_the_shell() {
        assert_eq!(shell_word("/src/app-1.2"), "/src/app-1.2");
        assert_eq!(shell_word("/src/my app"), "'/src/my app'");
        assert_eq!(shell_word("/src/it's"), r"'/src/it'\''s'");
    }
}
