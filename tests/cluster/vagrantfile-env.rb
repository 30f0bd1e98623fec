# Loads a Vagrantfile with a stand-in for Vagrant and prints each shell provisioner it
# configures as "MACHINE<TAB>SCRIPT<TAB>KEY=VALUE<TAB>...", so that tests/cluster/configs can run
# the lab's provisioners with the very environment the Vagrantfile gives them. Everything else
# the file configures is accepted and ignored. usage: ruby vagrantfile-env.rb VAGRANTFILE
class VagrantfileRecorder
  def initialize(machine, out)
    @machine = machine
    @out = out
  end

  def method_missing(name, *args, **opts, &block)
    if name == :define
      machine = VagrantfileRecorder.new(args[0].to_s, @out)
      block&.call(machine)
      return machine
    end
    if name == :provision && args[0].to_s == "shell"
      env = (opts[:env] || {}).map { |key, value| "#{key}=#{value}" }
      @out << ([@machine, opts[:path].to_s] + env).join("\t")
    end
    block&.call(self)
    self
  end

  def respond_to_missing?(*)
    true
  end
end

module Vagrant
  PROVISIONERS = []

  def self.configure(_version)
    yield VagrantfileRecorder.new("", PROVISIONERS)
  end
end

load ARGV.fetch(0)
puts Vagrant::PROVISIONERS
